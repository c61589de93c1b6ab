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


#: whether the last ``event_seconds`` kept the host's latency out of every sample (False: idle_start, no sleep kernel
#: in this torch, or a function that waits for the GPU itself, which no sleep can cover)
last_lead_ok = True


def event_seconds(fn, repeats: int, warmup: int = 1, idle_start: bool = False, before=None) -> float:
    """Median GPU seconds of ``fn`` (the CUDA work it queues on torch's current stream) over ``repeats`` calls,
    after ``warmup`` calls. ``idle_start=True`` times without the sleep ahead (host latency included), for
    comparison. ``before``: GPU work queued ahead of each repeat's start event, outside the interval (an L2
    flush: ``CudaBackend.l2_flush``)."""
    global last_lead_ok
    import torch

    sleep = getattr(torch.cuda, "_sleep", None)
    lead = sleep is not None and not idle_start
    cycles = LEAD_CYCLES

    def once() -> tuple[float, bool]:
        """One timed call: (ms, whether the host had submitted everything before the GPU reached the start)."""
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if lead:
            sleep(cycles)
        if before is not None:
            before()
        start.record()
        fn()
        end.record()
        covered = not (lead and start.query())
        end.synchronize()
        return start.elapsed_time(end), covered

    # the warm-up runs behind the sleep too and settles its length, so that a timed repeat is rarely taken again
    # (each take calls fn: a caller rotating inputs moves on to the next copy)
    for _ in range(warmup):
        if not once()[1] and cycles < MAX_LEAD_CYCLES:
            cycles *= 2
    torch.cuda.synchronize()
    samples, ok = [], lead
    while len(samples) < repeats:
        ms, covered = once()
        if not covered:
            if cycles < MAX_LEAD_CYCLES:  # the GPU reached the start before the host was done: again, longer
                cycles *= 2
                continue
            ok = False  # a function that waits for the GPU itself: no sleep covers it
        samples.append(ms * 1e-3)
    last_lead_ok = ok
    return statistics.median(samples)
