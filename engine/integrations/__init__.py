"""Floor 11, loopwright inside other systems: DBOS workflows (:mod:`~loopwright.integrations.dbos`)
and OpenTelemetry spans (:mod:`~loopwright.integrations.otel`); each an extra with a helpful import error.
"""
