"""calidist_metrics: framework-free calibration scores and calibrators (numpy and scipy only)."""

from ._validation import CalibrationWarning
from .calibrators import (
    BehaviourCalibrator,
    CaliDistCalibrator,
    IsotonicCalibration,
    NotFittedError,
    PlattScaling,
    TemperatureScaling,
    VectorScaling,
    calibrator_from_dict,
    load_calibrator,
    reliability_sigmoid,
    save_calibrator,
)
from .instability import confidence_instability, prediction_instability, reliability_score
from .scores import (
    ReliabilityBins,
    auroc,
    bootstrap_interval,
    brier_score,
    expected_calibration_error,
    paired_bootstrap_test,
    reliability_bins,
)

__all__ = [
    "BehaviourCalibrator",
    "CaliDistCalibrator",
    "CalibrationWarning",
    "IsotonicCalibration",
    "NotFittedError",
    "PlattScaling",
    "ReliabilityBins",
    "TemperatureScaling",
    "VectorScaling",
    "auroc",
    "bootstrap_interval",
    "brier_score",
    "calibrator_from_dict",
    "confidence_instability",
    "expected_calibration_error",
    "load_calibrator",
    "paired_bootstrap_test",
    "prediction_instability",
    "reliability_bins",
    "reliability_score",
    "reliability_sigmoid",
    "save_calibrator",
]
