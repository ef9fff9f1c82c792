# agentr1_hotpotqa: the "hotpotqa" task family (hotpotqa*.h/.cpp), on agentr1_tasks_core.
agentr1_library(hotpotqa
  SOURCES hotpotqa_family.cpp hotpotqa_kb.cpp hotpotqa_data.cpp hotpotqa_search.cpp qa_metrics.cpp
  DEPS agentr1_tasks_core agentr1_env agentr1_core)
agentr1_test(tasks_hotpotqa_test SOURCES hotpotqa_test.cpp DEPS agentr1_hotpotqa LABEL unit)
