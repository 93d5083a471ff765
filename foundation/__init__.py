"""The shared building blocks below the services.

Adapters for Kafka (publishing, dead letters), PostgreSQL (the pool), the
blob store and audio; settings, logging, lifecycle and metrics. Everything
here may be imported by ``producers``, ``consumers``, ``projections``,
``tts_node`` and the application above them, and imports nothing of theirs:
only ``contracts``.
"""
