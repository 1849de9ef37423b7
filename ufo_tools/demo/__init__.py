"""The README's main job: three oversubscribed guests under ufo-agent."""
