#!/usr/bin/env python3
"""Checks that TensorBoard's own reader accepts a clcnn event file and sees the given scalars.

Usage: check_tensorboard.py PATH TAG:STEP:VALUE [TAG:STEP:VALUE ...]

PATH is an event file or a log directory (every events.out.tfevents.* file in it is read, as
`tensorboard --logdir` would). Each TAG:STEP:VALUE must appear as a scalar event; a tag may itself
contain ':' (the last two fields are split off). Values are compared with a relative tolerance of
1e-6: they pass through float32 (relative spacing 6e-8), so this covers the decimal rounding in
the command line and nothing more.

Exit status: 0 all found, 1 a check failed, 2 usage error, 77 tensorboard is not installed (the
ctest SKIP_RETURN_CODE, so a missing package shows as skipped rather than passed; CI runs it with
the pinned TensorBoard of tests/pyenv.sh, and tests/python_test.sh turns a skip into a failure
there).
"""

import math
import os
import sys

SKIP = 77
REL_TOL = 1e-6


def parse_expectations(args):
    out = []
    for arg in args:
        parts = arg.rsplit(":", 2)
        if len(parts) != 3 or not parts[0]:
            raise ValueError(f"{arg!r}: want TAG:STEP:VALUE")
        out.append((parts[0], int(parts[1]), float(parts[2])))
    return out


def event_files(path):
    if os.path.isfile(path):
        return [path]
    return sorted(
        os.path.join(path, name) for name in os.listdir(path) if "tfevents" in name
    )


def check_file_version(path, errors):
    """The first record must carry file_version, as TensorFlow and PyTorch write it."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    events = list(EventFileLoader(path).Load())
    if not events:
        errors.append(f"{path}: no readable events")
    elif events[0].file_version != "brain.Event:2":
        errors.append(f"{path}: first event has file_version {events[0].file_version!r}")
    return len(events)


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    try:
        expected = parse_expectations(argv[2:])
    except ValueError as exc:
        print(f"check_tensorboard: {exc}", file=sys.stderr)
        return 2
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError as exc:
        print(f"check_tensorboard: skipped, tensorboard not importable ({exc})")
        return SKIP

    path = argv[1]
    files = event_files(path) if os.path.exists(path) else []
    if not files:
        print(f"check_tensorboard: {path}: no event file", file=sys.stderr)
        return 1

    errors = []
    n_events = sum(check_file_version(f, errors) for f in files)
    # size_guidance 0 keeps every event; the default samples scalars down to 10000.
    acc = EventAccumulator(path, size_guidance={"scalars": 0})
    acc.Reload()
    if acc.file_version != 2.0:
        errors.append(f"{path}: EventAccumulator saw file_version {acc.file_version!r}")
    tags = set(acc.Tags().get("scalars", []))
    for tag, step, value in expected:
        if tag not in tags:
            errors.append(f"{tag}: no such scalar tag (have {sorted(tags)})")
            continue
        got = [ev.value for ev in acc.Scalars(tag) if ev.step == step]
        if not got:
            errors.append(f"{tag}: no event at step {step}")
        elif not any(math.isclose(v, value, rel_tol=REL_TOL, abs_tol=0.0) for v in got):
            errors.append(f"{tag}@{step}: got {got}, want {value}")

    for err in errors:
        print(f"check_tensorboard: {err}", file=sys.stderr)
    if errors:
        return 1
    print(
        f"check_tensorboard: ok, {len(files)} file(s), {n_events} events, "
        f"{len(expected)} scalar(s) matched"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
