"""The bucket advisor: which static shape buckets to use for a length distribution, and whether they pay.

Modules, one idea each (all but `command` import numpy, the ``buckets``
extra; none imports torch):

* `inputs`: token lengths from a text file, JSONL, ``.npy`` or a run report;
* `sampler`: simulated micro-batches (random or length-grouped) and their maxima;
* `score`: positions a bucket list lays out, from the distribution of maxima;
* `dp`: the exact optimum over the bucket grid;
* `baselines`: hand-picked lists to compare with (quantiles, powers of two, even);
* `advise`: the comparison, out-of-sample validation, warnings and verdict;
* `render`: the table, JSON and the snippets users paste;
* `command`: ``layoutcheck buckets`` (its parser imports nothing heavy).
"""
