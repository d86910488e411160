import { test } from "node:test";
import assert from "node:assert/strict";
import { CRON_PRESETS, cronProblem, describeCron } from "../src/cron";

test("schedules berthd runs are accepted: Harbor's six fields or five", () => {
  for (const ok of ["0 0 * * * *", "0 */15 * * * *", "0 0 2 * * 0", "0 30 1-5 * * 1-5", "0 0 0 1,15 * ?", "*/5 * * * *", " 0  0 3 * * * "])
    assert.equal(cronProblem(ok), null, ok);
  for (const [expr] of CRON_PRESETS) assert.equal(cronProblem(expr), null, expr);
});

test("schedules berthd would never run are refused, saying which field", () => {
  assert.match(cronProblem("") ?? "", /six fields/);
  assert.match(cronProblem("0 0 * * *  * 1") ?? "", /six fields/);
  assert.match(cronProblem("0 0 * * * MON") ?? "", /day of week .*MON/);
  assert.match(cronProblem("0 60 * * * *") ?? "", /minute .*0-59/);
  assert.match(cronProblem("0 0 24 * * *") ?? "", /hour .*0-23/);
  assert.match(cronProblem("0 0 0 0 * *") ?? "", /day of month .*1-31/);
  assert.match(cronProblem("0 0 0 * 13 *") ?? "", /month .*1-12/);
  assert.match(cronProblem("0 */0 * * * *") ?? "", /step of 0/);
  assert.match(cronProblem("0 5-2 * * * *") ?? "", /outside/);
  assert.match(cronProblem("x 0 * * * *") ?? "", /second/);
});

test("common schedules in words", () => {
  assert.equal(describeCron("0 0 * * * *"), "every hour");
  assert.equal(describeCron("0 15 * * * *"), "every hour at minute 15");
  assert.equal(describeCron("0 0 */6 * * *"), "every 6 hours at minute 0");
  assert.equal(describeCron("0 30 2 * * *"), "every day at 02:30");
  assert.equal(describeCron("30 2 * * *"), "every day at 02:30");
  assert.equal(describeCron("0 0 2 * * 0"), "every Sunday at 02:00");
  assert.equal(describeCron("0 0 4 1 * *"), "on day 1 of every month at 04:00");
  assert.equal(describeCron("* * * * * *"), "cron * * * * * *");
  assert.equal(describeCron("0 * * * * *"), "every minute");
  assert.equal(describeCron("0 0 1-5 * * *"), "cron 0 0 1-5 * * *");
  assert.equal(describeCron("bad"), 'invalid schedule "bad"');
});
