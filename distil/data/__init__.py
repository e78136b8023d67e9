"""Reading datasets (load), deriving the run's splits (split), and preparing them once (prepared)."""
