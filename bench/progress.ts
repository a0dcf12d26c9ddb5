/** A live progress line on a TTY; a plain line every 5 s otherwise (CI logs). */
export function startProgress(
  label: string,
  total: number,
  progress: { done: number },
  readStock: () => Promise<string | null>,
  stock: number,
): { stop(): void } {
  const tty = process.stderr.isTTY;
  let last = { at: Date.now(), done: 0 };
  const n = (x: number) => x.toLocaleString('en-US');
  const tick = async () => {
    const left = Number(await readStock().catch(() => null));
    const now = Date.now();
    const rate = Math.round(((progress.done - last.done) / Math.max(now - last.at, 1)) * 1000);
    last = { at: now, done: progress.done };
    const line = `[bench] ${label}: ${n(progress.done)}/${n(total)} requests, sold ${n(stock - left)}/${n(stock)}, ${n(rate)} req/s`;
    process.stderr.write(tty ? `\r\x1b[K${line}` : `${line}\n`);
  };
  const timer = setInterval(() => void tick(), tty ? 250 : 5_000);
  return {
    stop: () => {
      clearInterval(timer);
      if (tty) process.stderr.write('\r\x1b[K');
    },
  };
}
