"""Qt plumbing without widgets: the job runner (the only place the GUI starts threads), coalesced redraws,
scoring and run dispatch, settings."""
