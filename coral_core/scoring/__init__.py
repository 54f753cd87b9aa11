"""Scoring candidates: evaluators combined into objectives and fitness (`scorer`), a
program's tests run and judged (`program_tests`, `verdicts`), pass@k (`metrics`), and
scoring what was produced elsewhere (`candidate_files`, `samples`, `sample_results`)."""
