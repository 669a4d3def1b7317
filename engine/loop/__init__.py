"""Floor 10, the loop: :class:`~loopwright.loop.runner.Runner` puts an agent's table, the stages and
the features together and drives runs through it (its public stepping protocol is what other
runners use); :mod:`~loopwright.loop.subrun` makes an agent a tool of another.
"""
