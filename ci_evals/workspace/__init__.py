"""A scenario's workspace: the plugin copied, the fixtures of earlier stages laid
in (`create`), checked before anything starts (`check_fixtures`)."""
