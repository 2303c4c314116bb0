"""The Corrector: bounded, mechanical edits for what the other maintenance agents found
(``geode.corrector.agent:Corrector``, looked up by ``geode.agents.upkeep``)."""
