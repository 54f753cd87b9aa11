"""Reading a run back and showing it: summaries, tables, exports, plots and the statistics
behind a ranking (intervals, paired comparisons)."""
