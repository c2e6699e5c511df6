"""Progress reporting of long computations: None (quiet), True (a tqdm bar when tqdm is importable, else
nothing), or any callable progress(stage: str, done: int, total: int)."""
import sys


class _TqdmProgress:
    """One tqdm bar per stage; closed when the computation returns (or is interrupted)."""

    def __init__(self, tqdm):
        self._tqdm = tqdm
        self._bar = None
        self._stage = None

    def __call__(self, stage, done, total):
        if stage != self._stage or self._bar is None:
            self.close()
            self._stage = stage
            self._bar = self._tqdm(total=total if total > 0 else None, desc=stage, file=sys.stderr, leave=False)
        self._bar.update(max(0, done - self._bar.n))

    def close(self):
        if self._bar is not None:
            self._bar.close()
            self._bar = None


class _Hook:
    """A context manager giving the callable handed to the C++ side."""

    def __init__(self, progress):
        self._owned = None
        if progress is None or progress is False:
            self.callback = None
        elif progress is True:
            try:
                from tqdm.auto import tqdm
            except ImportError:
                self.callback = None
            else:
                self._owned = _TqdmProgress(tqdm)
                self.callback = self._owned
        elif callable(progress):
            self.callback = progress
        else:
            from ._regatta import InputError
            raise InputError(f"progress: must be None, True or a callable progress(stage, done, total), "
                             f"got {type(progress).__name__}")

    def __enter__(self):
        return self.callback

    def __exit__(self, *exc):
        if self._owned is not None:
            self._owned.close()
        return False


def hook(progress):
    return _Hook(progress)
