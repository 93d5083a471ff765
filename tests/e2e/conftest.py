from tests.integration.conftest import pg, schema, stack, topics

__all__ = ["pg", "schema", "stack", "topics"]
