"""Floor 11, loopwright inside other systems: DBOS workflows (:mod:`~loopwright.integrations.dbos_runner`)
and OpenTelemetry spans (:mod:`~loopwright.integrations.otel`); each an extra with a helpful import error.
"""
