"""``rewardlab serve``: any reward source behind an HTTP server (rewardlab's ``/score`` protocol, OpenRLHF's
``/get_reward``, ``/health``, ``/metrics``), on uvicorn or as a Ray Serve deployment. See ``docs/serve.md``."""
