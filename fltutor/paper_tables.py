"""Numbers as printed in the papers, to set beside ours. Nothing here is a result of ours.

WAFFLe = Hao et al., "Weight Anonymized Factorization for Federated Learning", IEEE Access 2022.
Values are mean local test accuracy in %, variance in %^2 (their "±" spreads are kept too).
"""

# WAFFLe Table 2: local test accuracy, Z = 2, as (unimodal, multimodal)
WAFFLE_IBP_TABLE2 = {
    "mnist": {"fedavg": (94.46, 91.57), "fedprox": (94.44, 91.53), "qffl": (91.46, 88.42), "waffle_ibp": (96.23, 95.41)},
    "fashionmnist": {"fedavg": (83.96, 83.43), "fedprox": (84.19, 83.59), "qffl": (83.10, 85.73), "waffle_ibp": (87.12, 86.09)},
    "cifar10": {"fedavg": (52.54, 45.46), "fedprox": (52.36, 44.95), "qffl": (43.82, 38.25), "waffle_ibp": (71.30, 66.35)},
}
WAFFLE_IBP_TABLE2_SPREAD = {
    "mnist": {"fedavg": (0.84, 1.42), "fedprox": (1.15, 1.05), "qffl": (1.07, 1.24), "waffle_ibp": (0.31, 0.36)},
    "fashionmnist": {"fedavg": (0.91, 2.27), "fedprox": (0.99, 2.30), "qffl": (0.36, 0.21), "waffle_ibp": (0.89, 0.92)},
    "cifar10": {"fedavg": (0.14, 1.69), "fedprox": (0.11, 1.17), "qffl": (0.52, 1.12), "waffle_ibp": (0.92, 0.72)},
}

# WAFFLe Table 1: multimodal subpopulations, {metric: {dataset: {method: value}}}
WAFFLE_IBP_TABLE1 = {
    "majority": {"mnist": {"fedavg": 96.63, "fedprox": 96.43, "qffl": 94.93, "waffle_ibp": 95.93},
                 "fashionmnist": {"fedavg": 89.75, "fedprox": 89.95, "qffl": 88.73, "waffle_ibp": 88.91},
                 "cifar10": {"fedavg": 51.98, "fedprox": 51.26, "qffl": 42.00, "waffle_ibp": 68.37}},
    "minority": {"mnist": {"fedavg": 67.40, "fedprox": 68.60, "qffl": 54.20, "waffle_ibp": 93.87},
                 "fashionmnist": {"fedavg": 68.05, "fedprox": 67.50, "qffl": 69.40, "waffle_ibp": 79.67},
                 "cifar10": {"fedavg": 16.83, "fedprox": 16.56, "qffl": 18.14, "waffle_ibp": 55.00}},
    "gap": {"mnist": {"fedavg": 29.23, "fedprox": 27.83, "qffl": 40.73, "waffle_ibp": 2.07},
            "fashionmnist": {"fedavg": 21.70, "fedprox": 22.45, "qffl": 19.33, "waffle_ibp": 9.25},
            "cifar10": {"fedavg": 35.15, "fedprox": 32.70, "qffl": 23.87, "waffle_ibp": 13.37}},
    "variance": {"mnist": {"fedavg": 199, "fedprox": 186, "qffl": 355, "waffle_ibp": 26},
                 "fashionmnist": {"fedavg": 231, "fedprox": 233, "qffl": 212, "waffle_ibp": 145},
                 "cifar10": {"fedavg": 338, "fedprox": 318, "qffl": 220, "waffle_ibp": 182}},
}

# WAFFLe Table 2, "Param." column
WAFFLE_IBP_PARAMS = {"mnist": {"baseline": 155_800, "waffle_ibp": 120_200},
                     "fashionmnist": {"baseline": 28_880, "waffle_ibp": 18_155},
                     "cifar10": {"baseline": 61_770, "waffle_ibp": 42_780}}

# Weighted-averaging WAFFLE = Beaussart et al., "WAFFLE: Weighted Averaging for Personalized
# Federated Learning", 2021. Table 1, MNIST: Alice's best local test accuracy (%) over 100
# rounds, mean and std over 5 seeds, {distribution: {method: (mean, std)}}.
WEIGHTED_WAFFLE_TABLE1 = {
    "A": {"local": (96.88, 0.47), "fedavg": (98.99, 0.08), "scaffold": (99.03, 0.08),
          "weight_erosion": (99.01, 0.16), "waffle": (98.93, 0.10), "apfl": (97.55, 0.13)},
    "B": {"local": (99.38, 0.09), "fedavg": (98.97, 0.18), "scaffold": (99.24, 0.17),
          "weight_erosion": (99.69, 0.07), "waffle": (99.69, 0.03), "apfl": (99.36, 0.09)},
    "C": {"local": (98.54, 0.10), "fedavg": (98.56, 0.10), "scaffold": (98.77, 0.10),
          "weight_erosion": (99.00, 0.08), "waffle": (99.00, 0.08), "apfl": (98.45, 0.08)},
    "A*": {"local": (96.56, 0.27), "fedavg": (13.37, 3.21), "scaffold": (19.93, 5.95),
           "weight_erosion": (98.09, 0.26), "waffle": (97.99, 0.26), "apfl": (96.24, 0.22)},
    "B*": {"local": (99.47, 0.07), "fedavg": (45.26, 4.10), "scaffold": (57.51, 4.02),
           "weight_erosion": (99.67, 0.09), "waffle": (99.63, 0.11), "apfl": (99.44, 0.07)},
}
