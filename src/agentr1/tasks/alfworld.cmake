# agentr1_alfworld: the "alfworld" task family (alfworld*.h/.cpp), on agentr1_tasks_core.
agentr1_library(alfworld
  SOURCES alfworld_world.cpp alfworld_generator.cpp alfworld_expert.cpp alfworld_game.cpp alfworld_family.cpp
  DEPS agentr1_tasks_core agentr1_env agentr1_core)
agentr1_test(tasks_alfworld_test SOURCES alfworld_test.cpp DEPS agentr1_alfworld LABEL unit)
