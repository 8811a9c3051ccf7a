"""The sandbox side of the code verifier: a warm "zygote" interpreter and the workers it forks.

This folder is run, never imported by rewardlab itself (``python -I -S FOLDER/__main__.py CONFIG_FD
SOCKET_FD``, see ``__main__.py``). It must stay light (standard library only) because every sandboxed
program is a fork of it, and it runs where neither rewardlab nor any site-packages is visible
(``sys.path``: the standard library and the allowed packages, see ``layout.py``). Its configuration comes
through a descriptor, not ``argv``. Inside the sandbox's root the folder is a read-only mount, ``/rk_zygote``,
holding these modules and nothing else; they import each other relative to the package ``rk_zygote``.

Start-up, native backend (``start.py``): the host-side process enters new mount, IPC, UTS and network
namespaces, builds the read-only root (``namespaces.py``), chroots, and then runs this folder again from
inside the root (``/rk_zygote/__main__.py``) with the part of its configuration that names no host path.
So no process a program is forked from ever held the checkout's, the venv's or the temporary directories'
paths (bwrap starts it inside already).

Process tree (``proctree.py``)::

    zygote (root, started once; own mount + network + IPC + UTS namespace, chrooted into a read-only root)
      ├─ slot i (root, PID 1 of a PID namespace of its own; warm, one program at a time; never reads
      │    │      a program's output, so its memory stays what it was when it was forked)
      │    └─ supervisor S (forked per program; collects the program's output, reports, exits;
      │         │           supervisor.py)
      │         └─ program P (private uid, rlimits, no_new_privs, fresh working dir: a tmpfs of its own,
      │              its own IPC and network namespaces: whatever System V IPC or socket it creates is
      │              gone with it; program.py), one of:
      │              "stdio"     - the program on stdin; stdout goes to S, then to the parent, which
      │                            alone holds the expected outputs and compares
      │              "candidate" - loads the solution, then answers the judge's calls over a socket
      │                            (rpc.py)
      └─ judge j (its own private uid; warm, one sample at a time; judge.py)
           runs the test code (from a memfd the candidate never sees) with fresh globals, calling the
           candidate's functions through the socket; writes the verdict to the parent

After each program its supervisor kills every other process of the slot's namespace (``kill(-1)``,
``reaper.py``), which includes double-forked, ``setsid``-ed daemons (it is their subreaper), reaps them, and
unmounts and removes the working directory. A program is forked from its own supervisor, which had read
nothing but the program's code: no earlier program's output or code is in its memory.
The judge never runs solution code and the candidate never holds the tests, so nothing the solution does
in its own process (exit early, print, patch builtins or ``assert`` helpers, walk the stack or ``gc`` for the
expected values) changes the verdict: the judge sees plain data values (decoded by a strict, non-pickle
decoder, ``wire.py``) or opaque handles, never the solution's objects.

Without root or namespaces (the ``rlimit`` backend) the folder runs from its host path, and the audit
hooks of ``guards.py`` stand in for the root.
"""
