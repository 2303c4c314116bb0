"""The Corrector: bounded, mechanical edits for what the other maintenance agents found
(``corrector.agent:Corrector``, looked up by ``agents.upkeep``)."""
