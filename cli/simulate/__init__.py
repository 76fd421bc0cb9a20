"""`firsttoken simulate`: a local simulated LLM upstream (OpenAI Chat/Completions/Responses + Anthropic
Messages) with a believable timing model and injectable faults, for testing the proxy without internet."""

from firsttoken.cli.simulate.config import DELIVERY_FAULTS, ERROR_FAULTS, FAULT_HEADER, FAULT_HELP, FAULTS, SimConfig
from firsttoken.cli.simulate.server import SimServer

__all__ = ["SimServer", "SimConfig", "FAULTS", "ERROR_FAULTS", "DELIVERY_FAULTS", "FAULT_HELP", "FAULT_HEADER"]
