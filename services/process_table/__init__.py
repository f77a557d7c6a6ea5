"""The process table service: the global program table in PostgreSQL, fed by call completions."""
