// A modal built on <dialog>: focus is trapped and Escape closes it, by the browser.
import type { ComponentChildren } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";

export function Dialog(props: { title: string; open: boolean; onClose: () => void; children: ComponentChildren; closable?: boolean }) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (props.open && !d.open) d.showModal();
    if (!props.open && d.open) d.close();
  }, [props.open]);
  return (
    <dialog
      ref={ref}
      aria-label={props.title}
      onCancel={(e) => {
        if (props.closable === false) e.preventDefault();
        else props.onClose();
      }}
    >
      <h2>{props.title}</h2>
      {props.open && props.children}
    </dialog>
  );
}

/** Copy to the clipboard with a visible confirmation. */
export async function copyText(text: string): Promise<boolean> {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    return false;
  }
}

/** A small "Copy" button that says "Copied" for a moment. */
export function CopyButton({ text, label }: { text: string; label: string }) {
  const [done, setDone] = useState(false);
  return (
    <button
      type="button"
      class="btn small"
      aria-label={`Copy ${label}`}
      onClick={async () => {
        setDone(await copyText(text));
        setTimeout(() => setDone(false), 1500);
      }}
    >
      {done ? "Copied" : "Copy"}
    </button>
  );
}
