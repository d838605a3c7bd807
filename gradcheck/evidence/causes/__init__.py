"""A cause's facts, one frozen family per module, each saying itself: `facts.words(mistake)` is
what is wrong and the fix (the core builds them into report.Cause, whose `what` and `fix` read
them). Mistakes that need no facts are worded by `plain_words`."""

from __future__ import annotations

from gradcheck.evidence.causes.base import PLAIN, Facts, WhatAndFix, Words, plain_words
from gradcheck.evidence.causes.checks import (
    Compiled,
    CreatedInCall,
    Kinked,
    NoForwardRule,
    NoSecondOrderGradient,
    NotCompiled,
    OutputChanged,
    SecondOrder,
    UnusedLayer,
    kink_place,
    spectrum_of,
)
from gradcheck.evidence.causes.custom_gradients import (
    CausedOnItsOwn,
    ContractSlip,
    NoneOnItsOwn,
    OnItsOwn,
    ProbedOnItsOwn,
    RaisedOnItsOwn,
    SecondOrderOnItsOwn,
    ShapeOnItsOwn,
    raised_clause,
    raised_without_fix,
)
from gradcheck.evidence.causes.gradients import (
    ReturnedShape,
    ReturnedValues,
    TensorFlowGradientOp,
    UpstreamProbe,
    WrongGradientReason,
)
from gradcheck.evidence.causes.mistakes import Mistake
from gradcheck.evidence.causes.paths import (
    SPELLINGS,
    CutOp,
    DivergedWeight,
    FirstNonFinite,
    NonFiniteOp,
    NoNonFiniteOp,
)
from gradcheck.evidence.causes.sources import (
    FractionalPower,
    InfiniteFill,
    InfiniteMask,
    LogOfMask,
    OutsideSupport,
    PreviousUpdate,
    ScheduleSpike,
    Source,
    SwappedArguments,
    Trial,
    UnboundedTerm,
    UnscaledFeature,
)

__all__ = [
    "PLAIN", "SPELLINGS", "CausedOnItsOwn", "Compiled", "ContractSlip", "CreatedInCall", "CutOp",
    "DivergedWeight", "Facts", "FirstNonFinite", "Kinked", "Mistake", "NoForwardRule",
    "NoNonFiniteOp", "NoSecondOrderGradient", "NoneOnItsOwn", "NonFiniteOp", "NotCompiled",
    "OnItsOwn", "OutputChanged", "ProbedOnItsOwn", "RaisedOnItsOwn", "ReturnedShape",
    "ReturnedValues", "SecondOrder", "SecondOrderOnItsOwn", "ShapeOnItsOwn",
    "TensorFlowGradientOp", "UnusedLayer", "UpstreamProbe", "WhatAndFix", "Words",
    "WrongGradientReason", "kink_place", "plain_words", "raised_clause", "raised_without_fix",
    "spectrum_of",
    "FractionalPower", "InfiniteFill", "InfiniteMask", "LogOfMask", "OutsideSupport",
    "PreviousUpdate", "ScheduleSpike", "Source", "SwappedArguments", "Trial", "UnboundedTerm",
    "UnscaledFeature",
]
