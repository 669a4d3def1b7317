"""The demo agents (public): what ``loopwright demo`` runs, to try the engine with no key and no
network. :func:`demo_agent` is a trip-cost assistant that does real work on a scripted model;
:func:`helpdesk_agent` a dispatcher handing work to billing and sales agents.

The scripted "model" is a function of the request: it reads the tool results already in the
history and decides the next step from them, so the final answer is computed from what the
tools returned. The run shows one parallel step (two weather look-ups at once), one tool error
the model recovers from (bad arguments, then corrected), and a final answer.
"""

from __future__ import annotations

from .agents import DEMO_INPUT, DEMO_OPTIONS, HELPDESK_INPUT, TripAnswer, demo_agent, demo_tools, helpdesk_agent

__all__ = ["DEMO_INPUT", "DEMO_OPTIONS", "HELPDESK_INPUT", "TripAnswer", "demo_agent", "demo_tools", "helpdesk_agent"]

for _name in ("TripAnswer", "demo_agent", "demo_tools", "helpdesk_agent"):
    globals()[_name].__module__ = __name__
