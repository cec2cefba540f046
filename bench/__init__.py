"""The benchmarks: measurements apart from views, one plan, one writer, one view per results file.

    python -m bench            # what `make bench` runs: measure, write the results, print
    python -m bench --quick    # tiny sizes, into a temporary folder: a smoke test
    python -m bench --show     # measure nothing: print the committed results as the pages do

The layout:

- measurements/  one module per measurement, each `measure(plan) -> dict`: what it measured,
                 every run of it, as numbers and names, no wording. __main__.py's MEASUREMENTS
                 says which fills which key of which results file.
- plan.py        the one plan: how much each measurement does, FULL (`make bench`) and QUICK.
- results.py     the one writer: docs/assets/bench/NAME.json, the plan part, the measurements
                 and their provenance (provenance.py: machine, versions, date, load).
- views/         one view per results file, `view(results) -> dict`: the only code that turns
                 a results file into what the pages say (derived figures, comparisons, targets,
                 tables, sentences), computed when the site is built and never stored.
- timing.py      the one timing helper: how a variant is timed, the two rules that say what a
                 set of timings supports (a winner only when the runs separate; a target judged
                 only when its floor is steadier than its margin), and how a time reads.
- launch.py      the one launcher of a measurement's worker processes (torchrun, a timeout).

How a page's number gets there, through three files: the measurement module measures it (say
`measurements/save_speed.py`, every run of a save), `results.py` stores it as it is in the
results file (`docs/assets/bench/performance.json`), the results file's view derives and words
it (`views/performance.py`: the ratio of medians, "1.07×"), and the page names it
(`{{ bench.performance.headline.save_ratios }}` in docs/performance.md; hooks/build_facts.py
puts the view's value in as it is). A view imports nothing from bench/ but the basics (plan,
timing, provenance), which import nothing from bench/ themselves, so no file can come between;
tests/bench/test_three_files.py checks it for every `{{ bench.* }}` on the pages.
"""
