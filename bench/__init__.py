"""The benchmarks: one module per measurement, each with `measure(plan) -> dict`.

    python -m bench            # what `make bench` runs: measure, print, write the results
    python -m bench --quick    # tiny sizes, into a temporary folder: a smoke test
    python -m bench --show     # measure nothing: print the committed results as the pages do

Measuring: sampler_position, save_speed, hash_speed, load_memory, loop_overhead, suite_time
(performance.json), serialization (serialization.json) and distributed (distributed.json:
DCP saves over gloo ranks and throughput at several world sizes, with its workers
distributed_save and distributed_train); plan.py says how much each does,
common.py times, provenance.py records where and with what. The results files hold numbers and
provenance only. From them, metrics.py derives ratios and comparisons, verdicts.py holds the
rules (a winner only when the runs separate; a target judged only when its floor is steadier than
its margin), targets.py judges the targets, and performance_tables, performance_text and
serialization_view word them; views.py puts that together for the site's build and for printing.
"""
