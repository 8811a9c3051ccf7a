"""The demos: end-to-end runs on CPU that show a technique working (``scripts/demo``, ``scripts/demo-tools``)."""
