"""stabkit-fedyogi: an example stabkit plug-in (algorithm, model factory, stability bound)."""
