"""A run: its driver (`runner`), one trial (`trial`), its folder (`rundir`) and store
(`store`), the lifecycle hooks, and the plugin objects a configuration builds (`factories`)."""
