"""Floor 10, the loop: :class:`~loopwright.loop.runner.Runner` puts an agent's table, the stages and
the features together and drives runs through it (its public stepping protocol is what other
runners use); :mod:`~loopwright.loop.subrun` makes an agent a tool of another.

- :mod:`~loopwright.loop.runner`: the facade (``run``, ``stream``, ``resume``, ``pause``, ``cancel``)
  and the stepping protocol (``handler``, ``adopt``, ``attach``, ``register``, ``is_running``);
- :mod:`~loopwright.loop.run`: :class:`~loopwright.loop.run.Run`, the step loop with its clock (the
  fairness probe and the deadline), and :class:`~loopwright.loop.run.RunHost`, what a Run reads of
  its runner;
- :mod:`~loopwright.loop.stream`: ``RunStream``; :mod:`~loopwright.loop.options`: ``RunOptions``.
"""
