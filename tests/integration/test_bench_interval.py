"""bench/bench.py's 95% intervals (paired_interval): the pairs of the alternation are resampled
together, so what both sides of a pair share (the machine's drift) does not widen the interval,
and what differs between the sides does. No kernel is started."""
import os
import statistics
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
sys.path.append(os.path.join(os.path.dirname(__file__), "..", "..", "bench"))  # last: nothing shadowed
import bench  # noqa: E402

RATIO = staticmethod(lambda p, v: v / p)
DIFF = staticmethod(lambda p, v: v - p)


def singles(n):
    return [(i, i + 1) for i in range(n)]


class PairedInterval(unittest.TestCase):
    ratio, diff = RATIO, DIFF

    def test_a_side_slower_by_the_same_factor_in_every_pair_has_that_factor_alone(self):
        # The machine drifts 3x over the run; the side is 1.25x plain at every moment.
        plain = [0.1 * (1 + i / 7) for i in range(15)]
        side = [x * 1.25 for x in plain]
        lo, hi = bench.paired_interval(plain, side, singles(15), self.ratio)
        self.assertAlmostEqual(lo, 1.25, places=9)
        self.assertAlmostEqual(hi, 1.25, places=9)

    def test_unpaired_noise_widens_the_interval_around_the_ratio(self):
        plain = [0.3, 0.31, 0.29, 0.305, 0.295, 0.3, 0.31, 0.29, 0.3, 0.302, 0.298, 0.3, 0.31, 0.29, 0.3]
        side = [x * f for x, f in zip(plain, (1.0, 1.3, 1.1, 1.2, 1.05, 1.25, 1.15, 1.1, 1.2, 1.0, 1.3,
                                              1.1, 1.15, 1.2, 1.05))]
        lo, hi = bench.paired_interval(plain, side, singles(15), self.ratio)
        ratio = statistics.median(side) / statistics.median(plain)
        self.assertLess(lo, ratio)
        self.assertGreater(hi, ratio)
        self.assertGreater(lo, 1.0)
        self.assertLess(hi, 1.3)

    def test_blocks_are_resampled_whole(self):
        # Ten blocks of 30 round trips; within each block the side is plain + 0.5 ms, and the
        # blocks differ by up to 2 ms (drift both sides share).
        plain, side = [], []
        for b in range(10):
            for j in range(30):
                t = 0.004 + 0.0002 * b + 0.00001 * j
                plain.append(t)
                side.append(t + 0.0005)
        blocks = [(b * 30, (b + 1) * 30) for b in range(10)]
        lo, hi = bench.paired_interval(plain, side, blocks, self.diff)
        self.assertAlmostEqual(lo, 0.5, places=6)
        self.assertAlmostEqual(hi, 0.5, places=6)

    def test_the_same_samples_give_the_same_interval(self):
        plain = [0.30, 0.35, 0.28, 0.40, 0.33, 0.31, 0.29]
        side = [0.33, 0.36, 0.33, 0.41, 0.40, 0.30, 0.35]
        first = bench.paired_interval(plain, side, singles(7), self.ratio)
        self.assertEqual(first, bench.paired_interval(plain, side, singles(7), self.ratio))
        self.assertLessEqual(first[0], first[1])

    def test_a_cell_shows_the_interval_of_the_median_and_of_the_ratio(self):
        text = bench.cell("reset", "ms", 31.5, 300.0, (0.09, 0.11), (29.4, 34.0))
        self.assertEqual(text, "31.50 ms (29.4 to 34.0) (×0.10; ×0.09 to ×0.11)")
        text = bench.cell("rt", "ms", 4.5, 4.0, (0.1, 0.9))
        self.assertEqual(text, "4.50 ms (×1.12, +0.50 ms; +0.10 to +0.90)")


if __name__ == "__main__":
    unittest.main()
