"""A progress bar for long work: tqdm's where it is installed, else a line on stderr every few seconds (done,
rate, time left), as on a GPU machine without tqdm."""
import sys
import time


def progress_bar(total, description, enabled=True, unit="item", initial=0, delay=0.0):
    """A bar with update(n) and close(), counting `total` `unit`s from `initial`; silent unless `enabled`, and
    until `delay` seconds have passed (work that may be long or short shows nothing when it is short)."""
    try:
        from tqdm import tqdm
    except ImportError:
        return _PlainProgress(total, initial, description, enabled, unit, delay)
    return tqdm(total=total, initial=initial, desc=description, unit=unit, disable=not enabled, smoothing=0.05,
                dynamic_ncols=True, delay=delay)


class _PlainProgress:
    def __init__(self, total, initial, description, enabled, unit, delay=0.0, every_s=5.0):
        self.total, self.done, self.description, self.enabled, self.unit = total, initial, description, enabled, unit
        self.start_done, self.start, self.last, self.every_s = initial, time.monotonic(), 0.0, every_s
        self.delay = delay

    def update(self, n=1):
        self.done += n
        now = time.monotonic()
        if self.enabled and now - self.start >= self.delay and (now - self.last >= self.every_s or
                                                               self.done == self.total):
            self.last = now
            rate = (self.done - self.start_done) / max(now - self.start, 1e-9)
            left = (self.total - self.done) / rate if rate > 0 else float("inf")
            print(f"{self.description}: {self.done}/{self.total}, {rate:.2f} {self.unit}/s, {left / 60:.1f} min "
                  "left", file=sys.stderr, flush=True)

    def close(self):
        pass
