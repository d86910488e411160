/* Replication's pure parts: doublestar globs for filters, cron expressions for scheduled policies. */
#include <string.h>
#include <time.h>

#include "replication/replication.h"
#include "tests/unit/tap.h"

int main(void)
{
    ok(berth_repl_glob("team/**", "team/a/b/c") && berth_repl_glob("team/**", "team/a"), "** crosses slashes");
    ok(berth_repl_glob("team/*", "team/app") && !berth_repl_glob("team/*", "team/a/b"), "* stays in one component");
    ok(berth_repl_glob("{team,ops}/app", "ops/app") && !berth_repl_glob("{team,ops}/app", "dev/app"), "alternatives");
    ok(berth_repl_glob("v1.?", "v1.2") && !berth_repl_glob("v1.?", "v1.10"), "? is one character");
    ok(berth_repl_glob("a/**/b", "a/b") && berth_repl_glob("a/**/b", "a/x/y/b") && !berth_repl_glob("a/**/b", "a/x/c"),
       "**/ may be empty");
    ok(!berth_repl_glob("team", "team2") && berth_repl_glob("", "") && !berth_repl_glob("", "x"), "whole-name matches");
    struct tm tm = {.tm_min = 30, .tm_hour = 2, .tm_mday = 15, .tm_mon = 5, .tm_wday = 3};
    ok(berth_repl_cron_matches("30 2 * * *", &tm) && berth_repl_cron_matches("0 30 2 * * *", &tm), "five and six fields");
    ok(berth_repl_cron_matches("*/15 * * * *", &tm) && !berth_repl_cron_matches("*/20 * * * *", &tm), "steps");
    ok(berth_repl_cron_matches("0-45 1-3 * 6 3", &tm) && !berth_repl_cron_matches("0-45 1-3 * 7 3", &tm), "ranges and months");
    ok(berth_repl_cron_matches("29,30 * * * *", &tm) && !berth_repl_cron_matches("bogus", &tm), "lists; junk never fires");
    return tap_done();
}
