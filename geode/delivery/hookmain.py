"""The hook's entry point: ``python -S .../geode/delivery/hookmain.py claude|codex``.

Why a script path and ``-S``: the command runs before every tool call. ``-S`` skips
``site`` (about 4 ms); a pip console script would import ``re`` before our code runs. With
``-S`` the package is not on ``sys.path``, so this file puts the folder that holds ``geode/``
there (site-packages, or the checkout for an editable install: the same layout in both).

Fail open: any error, including one in an import, means exit 0 and no output, so a broken
geode can never block the agent. The error is appended to ``GEODE_HOME/hook-errors.log``
(capped) so that "I installed this and nothing happened" can be diagnosed: ``geode doctor``
shows it. The one exception is the installer's ``Probe`` event, which must fail loudly when
the code cannot be imported, or the installer could not tell a broken install from a good one.
"""

import os
import sys

_MAX_LOG = 256 * 1024

#: The rooms of geode the hook loads (besides the empty package root): the installer
#: byte-compiles exactly these, tests/test_hook_imports.py holds the hook to them.
HOOK_ROOMS = ("kernel", "delivery")


def _log_error(exc: BaseException) -> None:
    try:
        home = os.environ.get("GEODE_HOME") or os.path.expanduser("~/.geode")
        path = os.path.join(home, "hook-errors.log")
        if os.path.exists(path) and os.path.getsize(path) > _MAX_LOG:
            os.replace(path, path + ".1")
        import time
        import traceback

        with open(path, "a", encoding="utf-8") as fh:
            fh.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {type(exc).__name__}: {exc}\n")
            fh.write("".join(traceback.format_exception(exc)[-6:]))
    except Exception:  # noqa: BLE001, S110 - fail-open edge: a failing log must not fail the hook
        pass


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    agent = argv[0] if argv else "claude"
    raw = ""
    try:
        raw = sys.stdin.read() if not sys.stdin.isatty() else ""
    except Exception:  # noqa: BLE001 - fail-open edge: unreadable stdin is an event with no data
        raw = ""
    probe = '"Probe"' in raw
    try:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        if root not in sys.path:
            sys.path.insert(0, root)
        from geode.delivery.hook import run
        from geode.kernel import frontmatter

        frontmatter.FULL_PARSER = False  # standard library only: a note the subset declines is skipped
        code, out = run(agent, raw)
    except BaseException as exc:  # noqa: BLE001 - fail open, always
        if probe:
            sys.stderr.write(f"geode hook cannot run: {type(exc).__name__}: {exc}\n")
            return 1
        _log_error(exc)
        return 0
    if out:
        try:
            sys.stdout.write(out)
            sys.stdout.flush()
        except Exception:  # noqa: BLE001 - fail-open edge: the agent closed the pipe
            return 0
    return code


if __name__ == "__main__":
    sys.exit(main())
