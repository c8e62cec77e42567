"""The lm-eval Task classes: lm-eval's hooks, handing the work to the other folders."""
