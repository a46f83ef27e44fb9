# Source: https://github.com/Metta-AI/metta/blob/c0b07b399e71bee3088c00a36af655ff2ce60d80/packages/mettagrid/python/src/mettagrid/policy/policy.py
# Adapted excerpt, after the fix https://github.com/Metta-AI/metta/commit/c0b07b399e71bee3088c00a36af655ff2ce60d80
# (trimmed to the code the fix touches; omitted lines are marked).
"""Base policy classes and interfaces."""

import ctypes
from abc import abstractmethod
from pathlib import Path
from typing import Any, Generic, Optional, Sequence, Tuple, TypeVar, cast

import numpy as np
import torch
import torch.nn as nn
from pydantic import BaseModel, Field

from mettagrid.mettagrid_c import dtype_observations
from mettagrid.policy.policy_env_interface import PolicyEnvInterface
from mettagrid.policy.policy_registry import PolicyRegistryMeta
from mettagrid.simulator import Action, AgentObservation, Simulation

# Type variable for agent state - can be any type
StateType = TypeVar("StateType")


# ... (lines 22-219 omitted)
class StatefulAgentPolicy(AgentPolicy, Generic[StateType]):
    """AgentPolicy wrapper that manages internal state (e.g., for RNNs).

    This wraps a stateful policy implementation and maintains the state
    across step() calls, providing a stateless AgentPolicy interface.

    StateType can be any type representing the agent's internal state.
    For example, Tuple[torch.Tensor, torch.Tensor] for LSTM hidden states.
    """

    def __init__(
        self,
        base_policy: "StatefulPolicyImpl[StateType]",
        policy_env_info: PolicyEnvInterface,
        agent_id: Optional[int] = None,
    ):
        """Initialize stateful wrapper.

        Args:
            base_policy: The underlying stateful policy implementation
            policy_env_info: The policy environment information
        """
        super().__init__(policy_env_info)
        self._base_policy = base_policy
        self._state: Optional[StateType] = None
        self._agent_id = agent_id
        self._agent_states: dict[int, StateType] = {}
        self._action_name_to_index = {name: idx for idx, name in enumerate(policy_env_info.action_names)}
        self._simulation: Simulation | None = None
        self._state_initialized = False

    def step(self, obs: AgentObservation) -> Action:
        """Get action and update hidden state."""
        if not self._state_initialized:
            self._initialize_state(self._simulation)
        if hasattr(self._base_policy, "set_active_agent"):
            self._base_policy.set_active_agent(self._agent_id)
        state = cast(StateType, self._state)
        with torch.no_grad():
            action, self._state = self._base_policy.step_with_state(obs, state)
        if self._agent_id is not None:
            self._agent_states[self._agent_id] = self._state
        return action

    def reset(self, simulation: Optional[Simulation] = None) -> None:
        """Reset the hidden state to initial state."""
        self._initialize_state(simulation)

    def _initialize_state(self, simulation: Optional[Simulation]) -> None:
        self._simulation = simulation
        self._base_policy.reset()
        self._state = self._base_policy.initial_agent_state()
        self._agent_states.clear()
        self._state_initialized = True
        if self._agent_id is not None:
            self._agent_states[self._agent_id] = self._state


class StatefulPolicyImpl(Generic[StateType]):
    """Base class for stateful policy implementations.

    This is used internally by policies that need to manage state.
    It provides step_with_state() which returns both action and new state,
    and initial_agent_state() which returns the initial state for a new agent.
    """

    def reset(self) -> None:
        """Reset the policy."""
        pass

    @abstractmethod
    def initial_agent_state(self) -> StateType:
        """Get the initial state for a new agent.

        Returns:
            Initial state for the agent. For LSTMs, this returns zero-initialized hidden/cell states.
        """
        ...

    def step_with_state(self, obs: AgentObservation, state: StateType) -> Tuple[Action, StateType]:
        """Get action and potentially update state.

        Args:
            obs: The observation
            state: Current hidden state (e.g., RNN hidden state)

        Returns:
            Tuple of (action, new_state)
        """
        raise NotImplementedError

    def set_active_agent(self, agent_id: Optional[int]) -> None:
        """Optional hook for implementations that need the calling agent id."""
        _ = agent_id


# ... (lines 316-332 omitted)
