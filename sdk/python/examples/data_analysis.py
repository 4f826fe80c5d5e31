#!/usr/bin/env python3
"""A data-analysis session that installs nothing: upload a CSV, explore it in the stateful
kernel over several cells, plot, and bring the plot back.

    python3 examples/data_analysis.py [OUTPUT_DIR]

Run it from the checkout (it finds the package and the built `ipybox` binary) or after
`pip install ./sdk/python` with `ipybox` on PATH or in IPYBOX_BIN.
"""
import asyncio
import csv
import math
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from ipybox_native import ExecutionError, OutputChunk, Sandbox  # noqa: E402


def write_csv(path):
    """A year of made-up daily temperatures for two cities."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["day", "city", "temp_c"])
        for day in range(365):
            season = math.sin((day - 100) / 365 * 2 * math.pi)
            w.writerow([day, "Oslo", round(5 + 12 * season + 3 * math.sin(day * 1.7), 1)])
            w.writerow([day, "Lisbon", round(17 + 6 * season + 2 * math.sin(day * 2.3), 1)])


async def main(out_dir):
    work = tempfile.mkdtemp(prefix="ipybox-example-", dir="/tmp")
    try:
        await analyse(work, out_dir)
    finally:
        shutil.rmtree(work)


async def analyse(work, out_dir):
    data = os.path.join(work, "temps.csv")
    write_csv(data)
    os.mkdir(os.path.join(work, "app"))
    # /app is a directory of our own, removed afterwards. No network at all: an allowlist
    # naming only a documentation address lets nothing out.
    async with Sandbox(workspace=os.path.join(work, "app"), allowed_domain="192.0.2.1") as sb:
        await sb.upload(data, "data/temps.csv")

        # Cell 1: load with the standard library; the kernel keeps `rows` for later cells.
        r = await sb.execute(
            "import csv\n"
            "with open('/app/data/temps.csv') as f:\n"
            "    rows = [dict(r, day=int(r['day']), temp_c=float(r['temp_c'])) for r in csv.DictReader(f)]\n"
            "len(rows)")
        print("rows loaded:", r.text.strip())

        # Cell 2: monthly means, streamed as they are computed.
        code = (
            "from statistics import mean\n"
            "monthly = {}\n"
            "for city in ('Oslo', 'Lisbon'):\n"
            "    temps = [r['temp_c'] for r in rows if r['city'] == city]\n"
            "    monthly[city] = [round(mean(temps[m * 30:(m + 1) * 30 + (5 if m == 11 else 0)]), 1) for m in range(12)]\n"
            "    print(city, 'warmest month:', 1 + monthly[city].index(max(monthly[city])), flush=True)\n")
        async for item in sb.stream(code):
            if isinstance(item, OutputChunk):
                for line in item.text.splitlines():
                    print("  |", line)

        # Cell 3: a plot; it comes back as PNG bytes and is also saved under /app/images/.
        r = await sb.execute(
            "%matplotlib inline\n"
            "import matplotlib.pyplot as plt\n"
            "fig, ax = plt.subplots(figsize=(6, 3))\n"
            "for city, temps in monthly.items():\n"
            "    ax.plot(range(1, 13), temps, marker='o', label=city)\n"
            "ax.set_xlabel('month'); ax.set_ylabel('mean °C'); ax.legend()\n"
            "plt.show()")
        image = r.images[0]
        target = os.path.join(out_dir, "temperatures.png")
        image.save(target)
        print("plot: %s (%d bytes, in the sandbox at %s)" % (target, len(image.data), image.path))

        # A mistake in model-written code is an exception with the traceback, and the
        # session goes on.
        try:
            await sb.execute("monthly['Paris']")
        except ExecutionError as e:
            print("error kept apart:", e.ename, e.evalue)
        print("still there:", (await sb.execute("sorted(monthly)")).text.strip())


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    asyncio.run(main(os.path.abspath(out)))
