"""The benchmark and test harness (``iron bench``)."""
