"""Transfer-set augmentation: the `augment` config group (distil/conf/augment/)."""
