"""Inference backends behind one interface (`base.Backend`)."""
