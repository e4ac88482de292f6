"""Strata Studio's inference engine. Never imports Qt. Importing the package itself stays light:
torch is imported only by the modules that compute."""
