"""The foundation every package stands on: the one error tree (core.errors) and params.yaml as code (core.params)."""
