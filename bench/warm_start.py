"""How long a warm ``uno-audit serve --workers N`` takes to serve: from the command's start to its
``serving`` log line, with the embedded database's folder already made (its PostgreSQL stopped).

    .venv/bin/python bench/warm_start.py [--runs 5] [--workers 2] [--data-dir DIR] [--json]

A first start makes the folder (a temporary one unless ``--data-dir``), timed apart as ``first``; then
``--runs`` warm starts, each stopped with SIGTERM before the next. Prints the median and the maximum,
and the median time to the embedded database's start (the rest is migrations, key and workers).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

UNO_AUDIT = Path(sys.executable).with_name("uno-audit")
BOUND = 300.0  # seconds: the longest a stop may take before the server is killed


def start_to_serving(data_dir: Path, workers: int) -> tuple[float, float]:
    """Seconds from starting ``serve`` to its ``embedded database started`` line and to its ``serving``
    line; the server is stopped before returning."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "UNO_AUDIT_ADMIN_TOKEN")}
    command = [str(UNO_AUDIT), "serve", "--listen", "127.0.0.1:0", "--data-dir", str(data_dir)]
    started = time.perf_counter()
    serve = subprocess.Popen(
        [*command, "--workers", str(workers)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert serve.stdout is not None
    try:
        embedded = 0.0
        for line in serve.stdout:  # its JSON log lines, until it serves (or ends: no more lines)
            event = json.loads(line).get("event") if line.startswith(b"{") else None
            if event == "embedded database started":
                embedded = time.perf_counter() - started
            if event == "serving":
                return embedded, time.perf_counter() - started
        raise SystemExit(f"serve did not serve: {serve.stderr.read().decode() if serve.stderr else ''}")
    finally:
        serve.send_signal(signal.SIGTERM)
        try:
            serve.communicate(timeout=BOUND)
        except subprocess.TimeoutExpired:
            serve.kill()
            serve.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--data-dir", type=Path, help="an embedded database's folder (default: a new one)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    # Not under pytest's or a private temporary root: run as root, PostgreSQL runs as another user.
    own = args.data_dir is None
    data_dir = Path(tempfile.mkdtemp(prefix="uno-audit-warm-start-")) / "data" if own else args.data_dir
    try:
        _, first = start_to_serving(data_dir, args.workers)
        runs = [start_to_serving(data_dir, args.workers) for _ in range(args.runs)]
    finally:
        if own:
            shutil.rmtree(data_dir.parent, ignore_errors=True)
    warm = [serving for _, serving in runs]
    database = [embedded for embedded, _ in runs]
    figures = {
        "workers": args.workers,
        "cpus": os.cpu_count(),
        "first_s": round(first, 3),
        "warm_runs_s": [round(seconds, 3) for seconds in warm],
        "warm_median_s": round(statistics.median(warm), 3),
        "warm_max_s": round(max(warm), 3),
        "embedded_database_median_s": round(statistics.median(database), 3),
        "load_average_1min": round(os.getloadavg()[0], 2),
    }
    if args.json:
        print(json.dumps(figures))
        return
    print(f"serve --workers {args.workers} to SERVING, {args.runs} warm starts ({os.cpu_count()} CPUs):")
    print(f"  median {figures['warm_median_s']:.2f} s, max {figures['warm_max_s']:.2f} s")
    print(f"  runs   {', '.join(f'{seconds:.2f}' for seconds in warm)} s")
    print(f"  of which the embedded database's start: median {figures['embedded_database_median_s']:.2f} s")
    print(f"  load average (1 min) at the end: {figures['load_average_1min']} (the figures grow with it)")
    print(f"  first start (initdb included, for information): {first:.2f} s")


if __name__ == "__main__":
    main()
