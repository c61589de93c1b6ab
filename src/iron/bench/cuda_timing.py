"""GPU time of CUDA work with CUDA events, without the host's launch latency in it.

Events recorded on an idle GPU measure from the moment the start event is reached to the end event, and the start
event is reached at once: the interval then also holds the host's time to submit the work (for one kernel, the
launch call: ~5-10 us, 1-4% of a 0.26 ms kernel). So each repeat first queues a sleep kernel (``torch.cuda._sleep``,
no memory traffic) that keeps the GPU busy while the host records the start event, submits the work and records the
end event. The interval is then the GPU's own time for the work. Were the sleep too short (the start event already
reached when the host has finished submitting), the sample is taken again with a sleep twice as long.
"""

from __future__ import annotations

import statistics

#: sleep-kernel cycles queued ahead of each timed repeat (about 0.25 ms at 2 GHz); doubled when too short
LEAD_CYCLES = 1 << 19
MAX_LEAD_CYCLES = 1 << 27


def event_seconds(fn, repeats: int, warmup: int = 1, idle_start: bool = False) -> float:
    """Median GPU seconds of ``fn`` (the CUDA work it queues on torch's current stream) over ``repeats`` calls,
    after ``warmup`` calls. ``idle_start=True`` times without the sleep ahead (host latency included), for
    comparison."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    sleep = getattr(torch.cuda, "_sleep", None)
    cycles = LEAD_CYCLES
    samples = []
    while len(samples) < repeats:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        lead = sleep is not None and not idle_start
        if lead:
            sleep(cycles)
        start.record()
        fn()
        end.record()
        if lead and start.query() and cycles < MAX_LEAD_CYCLES:
            # the GPU reached the start event before the host had submitted everything: again, sleeping longer
            end.synchronize()
            cycles *= 2
            continue
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e-3)
    return statistics.median(samples)
