"""Read restrictions (issue 51): the management of them (``service``); the rules are
app/rules/restrictions/."""
