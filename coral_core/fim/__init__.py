"""Fill-in-the-middle pieces shared by the data set, the evaluator and the models: prompt
templates (`templates`), the start-up self-test (`canary`), the metrics (`metrics`) and the
rescoring of predictions made elsewhere (`predictions`)."""
