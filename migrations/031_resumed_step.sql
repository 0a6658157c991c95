-- The steps a resume spared (the checkpoint hold's figure, recovery/resume.h): the step an attempt
-- resumed from when its trainer said so (AI Toolkit's `#### IMPORTANT RESUMING FROM`, FACTS first_step
-- with the resuming signature), NULL when it started from step 0. Written by the finish; /metrics
-- sums it (rung_resumed_steps_total). No default: no row is rewritten.
ALTER TABLE attempts ADD COLUMN resumed_step int;
